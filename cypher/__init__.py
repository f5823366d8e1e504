"""The Cypher queries of every dialect, installed as the package ``pipeline.cypher_files``.

One query per file, ``<dialect>/<name>.cypher``; ``pipeline/graph/cypher.py`` loads them with
importlib.resources, so editable installs, ``pip install .`` and wheels read the same files.
This file only makes the folder a regular package (an editable install maps it by name).
"""
