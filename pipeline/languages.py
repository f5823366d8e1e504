"""The languages the full-text index can stem words by, and how notes and settings name
them. Kept apart from kodb/text.py (which stems) so that loading the settings, which checks
``vault.language``, imports nothing heavy."""

from __future__ import annotations

from typing import Final

#: Words kept whole (today's index before stemming, and the ``none`` setting).
NO_STEMMING: Final = "none"
#: The Snowball stemmers PyStemmer ships, by its names (copied so that loading the settings
#: imports no C extension; a test keeps the copy equal to ``Stemmer.algorithms()``).
SNOWBALL: Final = (
    "arabic", "armenian", "basque", "catalan", "czech", "danish", "dutch", "dutch_porter",
    "english", "esperanto", "estonian", "finnish", "french", "german", "greek", "hindi",
    "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali", "norwegian",
    "persian", "polish", "porter", "portuguese", "romanian", "russian", "serbian", "sesotho",
    "spanish", "swedish", "tamil", "turkish", "yiddish",
)  # fmt: skip
#: What the ``vault.language`` setting accepts.
LANGUAGES: Final = (NO_STEMMING, *SNOWBALL)
#: ISO 639-1 codes a note's ``lang:`` may give instead of a name (``en``, ``hu-HU``).
ISO_639_1: Final = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech",
    "da": "danish", "nl": "dutch", "en": "english", "eo": "esperanto", "et": "estonian",
    "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian", "lt": "lithuanian",
    "ne": "nepali", "no": "norwegian", "nb": "norwegian", "nn": "norwegian", "fa": "persian",
    "pl": "polish", "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian",
    "st": "sesotho", "es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish",
    "yi": "yiddish",
}  # fmt: skip
#: Names people write in their own language for the two languages vaults here mix most.
_NATIVE: Final = {"magyar": "hungarian", "angol": "english"}


def language_of(value: object) -> str | None:
    """The stemmer a note's ``lang:`` names ("en", "en-GB", "hu", "Hungarian", "magyar",
    "none"), or None when it names none known (the vault's language applies)."""
    if value is False:  # YAML reads a bare ``no`` (Norwegian's code) as false
        value = "no"
    if not isinstance(value, str):
        return None
    key = value.strip().casefold().replace("-", "_")
    if key in LANGUAGES or key in _NATIVE:
        return _NATIVE.get(key, key)
    return ISO_639_1.get(key.split("_", 1)[0]) if key else None
