"""Secrets at rest: the key file, webhook signing secrets encrypted, `almanac secrets rotate-key`."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import text

from almanac.db import schema_for
from almanac.delivery import targets
from almanac.delivery.models import Target
from almanac.errors import ValidationError
from almanac.vault import keyring, rotation, store
from almanac.vault.keyring import Keyring


def _raw(database, slug: str, sql: str) -> list:
    with database.tenant_connection(slug) as conn:
        return list(conn.execute(text(sql.replace("T.", f'"{schema_for(slug)}".'))).all())


def test_rotation_reencrypts_secrets_and_webhook_secrets_under_a_new_key_file(database, make_tenant, now):
    slug = make_tenant()
    ring = Keyring(None, database.settings.var_dir)
    first_key = (database.settings.var_dir / "secrets_key").read_text().strip()
    with database.tenant_session(slug) as s:
        store.put(s, ring, "API_TOKEN", "plain-value-1", now=now)
        _row, signing = targets.create(s, {"kind": "webhook", "name": "w", "url": "http://127.0.0.1:9/x",
                                           "topics": ["*"]}, now=now, allow_private=True, keyring=ring)
    (stored_target,) = _raw(database, slug, "SELECT secret FROM T.targets")
    assert stored_target[0].startswith("fernet:") and signing not in stored_target[0]
    before = _raw(database, slug, "SELECT value FROM T.secrets")
    done = rotation.rotate(database, [slug], targets_table=Target.__table__)
    assert (done.tenants, done.secrets, done.webhook_secrets) == (1, 1, 1)
    new_key = (database.settings.var_dir / "secrets_key").read_text().strip()
    assert new_key != first_key and "," not in new_key  # the old key is gone from the file
    after = _raw(database, slug, "SELECT value FROM T.secrets")
    assert after != before
    fresh = Keyring(None, database.settings.var_dir)
    with database.tenant_session(slug) as s:
        assert store.values(s, fresh) == {"API_TOKEN": "plain-value-1"}
    assert fresh.decrypt(_raw(database, slug, "SELECT secret FROM T.targets")[0][0]) == signing
    # A process still holding the old key reloads the file when a value does not decrypt.
    assert ring.decrypt(after[0][0]) == "plain-value-1"


def test_an_operator_key_rotates_from_new_comma_old(database, make_tenant, now):
    slug = make_tenant()
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    with database.tenant_session(slug) as s:
        store.put(s, Keyring(old, database.settings.var_dir), "TOKEN", "abc-123", now=now)
    one_key = database.settings.model_copy(update={"secrets_key": old})
    database.settings = one_key
    with pytest.raises(ValidationError, match="NEW,OLD"):
        rotation.rotate(database, [slug])
    database.settings = one_key.model_copy(update={"secrets_key": f"{new},{old}"})
    assert rotation.rotate(database, [slug]).secrets == 1
    with database.tenant_session(slug) as s:
        assert store.values(s, Keyring(new, database.settings.var_dir)) == {"TOKEN": "abc-123"}
    assert not (database.settings.var_dir / "secrets_key").exists()  # an operator key never touches the file


def test_a_key_that_is_not_a_fernet_key_is_refused(tmp_path):
    with pytest.raises(keyring.BadKey):
        Keyring("not-a-key", tmp_path)


def test_a_plain_legacy_value_still_reads_and_is_encrypted_by_rotation(tmp_path):
    ring = Keyring(None, tmp_path)
    assert ring.decrypt("whsec_legacy") == "whsec_legacy"
    assert ring.decrypt(ring.rotate_value("whsec_legacy")) == "whsec_legacy"


def test_migration_t0009_encrypts_the_webhook_secrets_already_stored(database, make_tenant, now):
    from alembic import command

    from almanac.tenants import migrations

    slug = make_tenant()
    schema = schema_for(slug)
    with database.tenant_connection(slug) as conn:
        command.downgrade(migrations._config("tenant", conn, schema, database.settings), "t0007_operating")
        conn.execute(text(f'INSERT INTO "{schema}".targets (kind, name, url, topics, enabled, secret, created_at, '
                          "updated_at) VALUES ('webhook', 'old', 'http://127.0.0.1:9/', '[\"*\"]', :t, "
                          "'whsec_bGVnYWN5LXNlY3JldC0xMjM0NTY3ODkwMTIzNDU2Nzg5MA==', :now, :now)"),
                     {"t": True, "now": now.replace(tzinfo=None)})
        if conn.in_transaction():
            conn.commit()
    migrations.upgrade_tenant(database, slug)
    (stored,) = _raw(database, slug, "SELECT secret FROM T.targets")[0]
    assert stored.startswith("fernet:")
    assert Keyring(None, database.settings.var_dir).decrypt(stored) == \
        "whsec_bGVnYWN5LXNlY3JldC0xMjM0NTY3ODkwMTIzNDU2Nzg5MA=="
