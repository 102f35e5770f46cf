"""`almanac secrets rotate-key`: every stored secret re-encrypted under a new key.

With the key in `var_dir/secrets_key` (the default), the command makes the new key itself: it
writes "new,old" (the new key first: encrypts; both: decrypt), re-encrypts every tenant's secrets
and webhook signing secrets under it, then writes "new" alone. A crash midway leaves "new,old",
under which every row still decrypts; run the command again. Running servers reload the file
the first time a value does not decrypt under the key they hold.

With `ALMANAC_SECRETS_KEY` set, the operator makes the new key
(`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`), sets
`ALMANAC_SECRETS_KEY=new,old` everywhere, runs the command, then drops `,old`.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.fernet import Fernet
from sqlalchemy import select, update

from almanac.db import Database
from almanac.errors import ValidationError
from almanac.vault import keyring as keys
from almanac.vault.models import Secret


@dataclass
class Rotation:
    tenants: int = 0
    secrets: int = 0
    webhook_secrets: int = 0


def rotate(db: Database, slugs: list[str], targets_table: object | None = None) -> Rotation:
    """Re-encrypt everything under a new first key (see the module's docstring); the counts."""
    settings = db.settings
    ring = keys.Keyring(settings.secrets_key, settings.var_dir)
    if settings.secrets_key:
        if len(keys.parse_keys(settings.secrets_key)) < 2:
            raise ValidationError("ALMANAC_SECRETS_KEY holds one key: set it to NEW,OLD (a new Fernet key first), "
                                  "run this again, then remove OLD.")
        return _reencrypt(db, slugs, ring, targets_table)
    old = ring.keys()
    keys.write_keyfile(ring.path, [Fernet.generate_key(), *old])
    ring.reload()
    done = _reencrypt(db, slugs, ring, targets_table)
    keys.write_keyfile(ring.path, ring.keys()[:1])
    return done


def _reencrypt(db: Database, slugs: list[str], ring: keys.Keyring, targets_table: object | None) -> Rotation:
    done = Rotation()
    for slug in slugs:
        with db.tenant_session(slug) as session:
            for row in session.execute(select(Secret)).scalars():
                row.value = ring.rotate_value(row.value)
                done.secrets += 1
            if targets_table is not None:
                t = targets_table
                for target_id, secret in session.execute(
                        select(t.c.id, t.c.secret).where(t.c.secret.is_not(None))).all():  # type: ignore[attr-defined]
                    session.execute(update(t).where(t.c.id == target_id)  # type: ignore[arg-type, attr-defined]
                                    .values(secret=ring.rotate_value(secret)))
                    done.webhook_secrets += 1
        done.tenants += 1
    return done
