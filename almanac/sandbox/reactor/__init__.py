"""Our QuickJS-NG reactor: its C source (almanac_qjs.c) and its reproducible build (build.py)."""
