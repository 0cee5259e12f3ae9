"""Sphinx configuration of eegrad's documentation site (``pip install -e ".[docs]"``, then
``python -m sphinx -W --keep-going -b html docs docs/_build/html``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # _generate.py
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import eegrad

project = "eegrad"
author = "the eegrad developers"
copyright = "the eegrad developers"
release = eegrad.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "bench-readme-table.md"]  # the README's copy of the bench table
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
# The guide's pages include sections of README.md, whose headings start below H2.
suppress_warnings = ["myst.header"]

# API reference: one page per public name, from the docstrings (numpydoc format).
autosummary_generate = True
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# Every documented object has a docstring of its own (numpydoc's GL08), except constructors
# (documented with their class) and the objectives' m and L (class attributes, documented as
# the class's attributes).
numpydoc_validation_checks = {"GL08"}
numpydoc_validation_exclude = {r"\.__init__$", r"^eegrad\.objectives\.\w+\.(m|L)$",
                               r"^eegrad\.flower\.RunState\.\w+$"}  # its fields: in Parameters

# Gallery: the scripts in examples/ whose names start with plot_ run at build time (quick
# settings); the others are shown as code.
sphinx_gallery_conf = {
    "examples_dirs": [str(HERE.parent / "examples")],
    "gallery_dirs": ["gallery"],
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"flower_app|__init__",
    "download_all_examples": False,
    "remove_config_comments": True,
    "image_scrapers": ("matplotlib", "_generate.figure_scraper"),
}

html_theme = "pydata_sphinx_theme"
html_title = f"eegrad {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}

# Reference tables generated from the code, not copied: configuration keys and the CLI.
from _generate import (
    write_api_reference,
    write_cli_reference,
    write_config_reference,
)

write_config_reference(HERE / "reference" / "configuration.md")
write_cli_reference(HERE / "reference" / "cli.md")
write_api_reference(HERE / "api.rst")
