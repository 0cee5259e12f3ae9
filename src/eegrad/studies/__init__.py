"""The studies: one module per study, and the registry that the CLI, the pipeline, the sweeps and
the report read (:func:`all_studies`, :func:`study_kind`). A new study is one module that calls
:func:`register_study`, plus its preset in ``eegrad/presets``."""

from .base import (
    MergeSpec,
    Section,
    Study,
    StudyKind,
    all_studies,
    load_study,
    ratio_se,
    register_study,
    study_kind,
    unregister_study,
)

__all__ = [
    "MergeSpec",
    "Section",
    "Study",
    "StudyKind",
    "all_studies",
    "load_study",
    "ratio_se",
    "register_study",
    "study_kind",
    "unregister_study",
]
