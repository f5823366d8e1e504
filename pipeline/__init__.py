"""vault-ko: what does a markdown vault know about a question, and when does it know nothing."""

__version__ = "0.1.0"
