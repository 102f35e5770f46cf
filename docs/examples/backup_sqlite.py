"""Back up an embedded (SQLite) Almanac while it runs: every database file, and the key files.

Usage: python3 backup_sqlite.py VAR_DIR BACKUP_DIR. SQLite's online backup copies each database
page by page, consistently, while the server keeps writing. The keys are copied beside them:
without `secrets_key` the tenants' secrets cannot be read back.
"""

import shutil
import sqlite3
import sys
from pathlib import Path

var, target = Path(sys.argv[1]), Path(sys.argv[2])
(target / "tenants").mkdir(parents=True, exist_ok=False)
for source in [var / "almanac.db", *sorted((var / "tenants").glob("*.db"))]:
    copy = target / source.relative_to(var)
    with sqlite3.connect(source) as live, sqlite3.connect(copy) as backup:
        live.backup(backup)
    print(f"{source.relative_to(var)}: {copy.stat().st_size} bytes")
for key in ("secret_key", "secrets_key"):
    if (var / key).exists():
        shutil.copy2(var / key, target / key)
