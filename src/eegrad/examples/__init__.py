"""Worked examples shipped with eegrad (run them with ``eegrad example NAME``)."""
