"""The studies: one module per study, and the registry that the CLI, the pipeline, the sweeps and
the report read (:func:`all_studies`, :func:`study_kind`). A new study is one module that calls
:func:`register_study`, plus its preset in ``eegrad/presets``."""

from . import base
from .base import *  # the registry's public names, listed once in base.__all__

__all__ = list(base.__all__)
