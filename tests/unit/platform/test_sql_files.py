"""The scheduler's PL/pgSQL has one current-state source, and migrations install frozen copies of it.

`almanac/platform/store/sql/` holds the functions and triggers as they are now; each migration that
installs one reads its own copy under `almanac/migrations/sql/<revision>/`. A current file must
equal the copy of the newest revision that installs it: editing a function in place (without a
migration) would leave every database on the old text while the code believed the new one.
"""

from __future__ import annotations

import re
from pathlib import Path

from almanac.migrations.pg_names import FROZEN
from almanac.platform.store.sql import FOLDER, INSTALLED
from almanac.platform.store.sql.functions import CALLED

_CREATED = re.compile(r"CREATE (?:OR REPLACE )?FUNCTION \{(tenant|shared)\}\.(\w+)\(")


def _current() -> dict[str, Path]:
    return {path.name: path for tree in INSTALLED for path in sorted((FOLDER / tree).glob("*.sql"))}


def _newest_frozen() -> dict[str, Path]:
    """Each file name -> its copy in the newest revision folder that has one (s/t numbering sorts)."""
    newest: dict[str, Path] = {}
    for folder in sorted(FROZEN.iterdir(), key=lambda p: (p.name[0], int(p.name[1:]))):
        for path in folder.glob("*.sql"):
            newest[path.name] = path
    return newest


def test_every_current_file_equals_the_frozen_copy_of_the_newest_migration_installing_it() -> None:
    current, frozen = _current(), _newest_frozen()
    assert set(current) == set(frozen), "a current file with no migration, or a migration's file gone from sql/"
    changed = [name for name, path in current.items() if path.read_text() != frozen[name].read_text()]
    assert changed == [], f"changed without a migration (add a new version and a revision installing it): {changed}"


def test_each_frozen_folder_is_read_by_its_migration() -> None:
    versions = Path(FROZEN.parent)
    for folder in FROZEN.iterdir():
        tree = "shared" if folder.name.startswith("s") else "tenant"
        (migration,) = (versions / tree / "versions").glob(f"{folder.name}_*.py")
        assert f'"{folder.name}"' in migration.read_text(), migration.name


def test_each_function_file_creates_the_versioned_function_it_is_named_after() -> None:
    for name, path in _current().items():
        if name == "triggers.sql":
            continue
        tree, created = _CREATED.search(path.read_text()).groups()  # type: ignore[union-attr]
        assert (tree, f"{created}.sql") == (path.parent.name, name)
        assert re.search(r"_v\d+$", created), f"{created}: unversioned"


def test_each_declared_function_has_its_file() -> None:
    for function in CALLED:
        assert (FOLDER / function.tree / f"{function.name}.sql").exists(), function.name
