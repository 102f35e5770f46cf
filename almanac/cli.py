"""The `almanac` command (SPEC section 2).

Every wrong input ends with one line on stderr and exit status 2; nothing is half-created.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from almanac import logs, retention
from almanac.db import Database
from almanac.delivery.models import Target
from almanac.errors import AlmanacError
from almanac.platform.store import quotas
from almanac.platform.clock import SystemClock
from almanac.settings import Settings
from almanac.tenants import auth, people, registry
from almanac.vault import rotation

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None)
tenant_app = typer.Typer(no_args_is_help=True, help="Tenants: create, list, quota.")
user_app = typer.Typer(no_args_is_help=True, help="People in tenants.")
token_app = typer.Typer(no_args_is_help=True, help="API tokens.")
secrets_app = typer.Typer(no_args_is_help=True, help="Tenants' secrets at rest.")
app.add_typer(tenant_app, name="tenant")
app.add_typer(user_app, name="user")
app.add_typer(token_app, name="token")
app.add_typer(secrets_app, name="secrets")

DEMO_SLUG, DEMO_EMAIL = "demo", "admin@demo.local"
RoleOption = Annotated[str, typer.Option("--role", help="admin, editor or viewer")]


class CliError(Exception):
    """A one-line message for the person at the terminal (exit status 2)."""


def _settings() -> Settings:
    try:
        return Settings()
    except Exception as exc:  # pydantic's message is long; keep its first useful line
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise CliError("configuration: " + " ".join(lines[1:3] or lines[:1])) from exc


def _setup_logging(settings: Settings) -> None:
    logs.configure(settings.log_level)


def _database() -> Database:
    settings = _settings()
    return Database(settings)


@app.command()
def migrate() -> None:
    """Upgrade the shared schema and every tenant's schema."""
    db = _database()
    report = registry.migrate_all(db)
    for slug, reason in report.failed.items():
        typer.echo(f"tenant {slug}: migration failed: {reason}", err=True)
    typer.echo(f"migrated the shared schema and {len(report.migrated)} tenant(s)"
               + (f"; {len(report.failed)} tenant(s) failed" if report.failed else ""))
    if report.failed:
        raise typer.Exit(1)


@app.command()
def serve(
    host: Annotated[Optional[str], typer.Option(help="address to bind [ALMANAC_HOST]")] = None,
    port: Annotated[Optional[int], typer.Option(help="port [ALMANAC_PORT]", min=1, max=65535)] = None,
    no_scheduler: Annotated[bool, typer.Option("--no-scheduler", help="serve the web UI and API only")] = False,
    demo: Annotated[bool, typer.Option("--demo", help="migrate, and create the demo tenant if there is none")] = False,
) -> None:
    """Web UI + API, and the scheduler unless told not to."""
    import uvicorn

    # deferred: the server and the worker load the web stack and the sandbox, which the other commands never use
    from almanac.web.app import create_app
    from almanac.worker import build_services

    settings = _settings()
    _setup_logging(settings)
    settings.resolved_secret_key()  # SPEC section 1: generated and kept under var_dir on first start
    services = build_services(settings)
    if demo:
        _ensure_demo(services.db, sign_in_url(host or settings.host, port or settings.port))
    app_ = create_app(settings, services=services, run_scheduler=not no_scheduler)

    # proxy_headers off: uvicorn would believe X-Forwarded-For from 127.0.0.1 (or FORWARDED_ALLOW_IPS);
    # the app believes only ALMANAC_TRUSTED_PROXIES (almanac.web.app).
    uvicorn.run(app_, host=host or settings.host, port=port or settings.port, log_level=settings.log_level,
                log_config=logs.uvicorn_log_config(settings.log_level), proxy_headers=False)


def sign_in_url(host: str, port: int) -> str:
    """The address to open in a browser: a wildcard bind is reached through loopback."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


def _ensure_demo(db: Database, url: str) -> None:
    registry.migrate_all(db)
    if DEMO_SLUG in registry.list_slugs(db):
        typer.echo(f"Demo tenant exists: sign in at {url} as {DEMO_EMAIL} (password printed on first start).")
        return
    created = registry.create_tenant(
        db, DEMO_SLUG, admin_email=DEMO_EMAIL, admin_password=None, name="Demo",
        min_interval_seconds=db.settings.default_min_interval_seconds, now=SystemClock().now(),
    )
    typer.echo(f"Created the demo tenant. Sign in at {url} with")
    typer.echo(f"  email:    {created.admin_email}")
    typer.echo(f"  password: {created.admin_password}")


@app.command()
def worker() -> None:
    """The scheduler and script runner alone (run several for scale-out)."""
    from almanac.worker import run_worker  # deferred: as in `serve`

    settings = _settings()
    _setup_logging(settings)
    run_worker(settings)


@tenant_app.command("create")
def tenant_create(
    slug: str,
    admin_email: Annotated[str, typer.Option("--admin-email")],
    admin_password: Annotated[Optional[str], typer.Option("--admin-password")] = None,
    name: Annotated[Optional[str], typer.Option("--name")] = None,
    min_interval_seconds: Annotated[Optional[int], typer.Option("--min-interval-seconds")] = None,
) -> None:
    """New tenant with its own schema and first admin."""
    db = _database()
    registry.migrations.upgrade_shared(db)
    created = registry.create_tenant(
        db, slug, admin_email=admin_email, admin_password=admin_password, name=name,
        min_interval_seconds=(
            db.settings.default_min_interval_seconds if min_interval_seconds is None else min_interval_seconds
        ),
        now=SystemClock().now(),
    )
    typer.echo(f"created tenant {created.slug} with admin {created.admin_email}")
    if created.admin_password:
        typer.echo(f"generated password: {created.admin_password}")


@tenant_app.command("list")
def tenant_list() -> None:
    """Tenants, one a line."""
    db = _database()
    with db.shared_session() as session:
        for tenant in registry.list_tenants(session):
            typer.echo(f"{tenant.slug}\t{tenant.name}\tmin_interval={tenant.min_interval_seconds}s")


QuotaOption = Annotated[Optional[int], typer.Option(min=0, max=2**31 - 1)]


@tenant_app.command("quota")
def tenant_quota(
    slug: str,
    kv_mb: QuotaOption = None,
    kv_keys: QuotaOption = None,
    schedules: QuotaOption = None,
    pending_jobs: QuotaOption = None,
    runs_per_day: QuotaOption = None,
    cpu_seconds_per_day: QuotaOption = None,
) -> None:
    """Shows, or sets, a tenant's quotas (with each one's use)."""
    changes = {name: value for name, value in dict(
        kv_mb=kv_mb, kv_keys=kv_keys, schedules=schedules, pending_jobs=pending_jobs,
        runs_per_day=runs_per_day, cpu_seconds_per_day=cpu_seconds_per_day).items() if value is not None}
    db = _database()
    now = SystemClock().now()
    with db.shared_session() as session:
        registry.get_tenant(session, slug)  # an unknown tenant is an error, before anything is written
        if changes:
            quotas.set_quotas(session, slug, changes, now)
    with db.tenant_session(slug) as session:
        report = quotas.report(quotas.of(session), quotas.use(session, now))
    for name, values in report.items():
        typer.echo(f"{name}\t{values['limit']}\tused {values['used']}")


@tenant_app.command("retention")
def tenant_retention(
    slug: str,
    days: Annotated[Optional[int], typer.Option(min=1, max=36_500, help="keep this many days of history")] = None,
    default: Annotated[bool, typer.Option("--default", help="back to ALMANAC_RETENTION_DAYS")] = False,
) -> None:
    """Shows, or sets, how many days of a tenant's history (runs, events, deliveries) are kept."""
    if days is not None and default:
        raise CliError("give --days or --default, not both")
    db = _database()
    with db.shared_session() as session:
        registry.get_tenant(session, slug)  # an unknown tenant is an error, before anything is written
        if days is not None or default:
            retention.set_retention_days(session, slug, days, SystemClock().now())
        kept = retention.retention_days(session, slug, db.settings.retention_days)
    typer.echo(f"{slug}	retention {kept} days")


@app.command()
def prune(
    tenant: Annotated[Optional[str], typer.Option("--tenant", help="only this tenant")] = None,
    batch: Annotated[Optional[int], typer.Option(min=1, max=10_000, help="rows per transaction "
                                                 "[ALMANAC_PRUNE_BATCH]")] = None,
) -> None:
    """Prunes history past each tenant's retention now, in small batches (the server also does it periodically)."""
    db = _database()
    with db.shared_session() as session:
        slugs = [t.slug for t in ([registry.get_tenant(session, tenant)] if tenant else registry.list_tenants(session))]
    report = retention.prune(db, slugs, db.settings.retention_days, SystemClock().now(),
                             batch=batch or db.settings.prune_batch)
    for slug, done in report.items():
        typer.echo(f"{slug}	runs {done.runs}	occurrences {done.occurrences}	events {done.events}"
                   f"	deliveries {done.deliveries}")
    if len(report) < len(slugs):
        raise CliError(f"{len(slugs) - len(report)} tenant(s) failed; see the log")


@user_app.command("add")
def user_add(
    tenant: Annotated[str, typer.Option("--tenant")],
    email: Annotated[str, typer.Option("--email")],
    role: RoleOption,
    password: Annotated[Optional[str], typer.Option("--password")] = None,
) -> None:
    """Adds a member."""
    db = _database()
    with db.shared_session() as session:
        row = registry.get_tenant(session, tenant)
        generated = people.add_member(session, row, email, role, password, now=SystemClock().now())
    typer.echo(f"added {people.normalize_email(email)} to {tenant} as {role}")
    if generated:
        typer.echo(f"generated password: {generated}")


@token_app.command("create")
def token_create(
    tenant: Annotated[str, typer.Option("--tenant")],
    name: Annotated[str, typer.Option("--name")],
    role: RoleOption,
) -> None:
    """Prints a new API token; the token alone is the last line."""
    db = _database()
    with db.shared_session() as session:
        row = registry.get_tenant(session, tenant)
        token, plaintext = auth.create_token(session, row, name, role, now=SystemClock().now())
        token_id = token.id
    typer.echo(f"token {token_id} '{name}' ({role}) for {tenant}; it is shown only this once:")
    typer.echo(plaintext)


@secrets_app.command("rotate-key")
def secrets_rotate_key() -> None:
    """Re-encrypts every tenant's secrets (and webhook signing secrets) under a new key (ALMANAC_SECRETS_KEY)."""
    from sqlalchemy import Table

    db = _database()
    registry.migrate_all(db)  # every tenant has the secrets table before it is read
    done = rotation.rotate(db, registry.list_slugs(db), targets_table=Target.__table__ if isinstance(
        Target.__table__, Table) else None)
    where = "ALMANAC_SECRETS_KEY's first key" if db.settings.secrets_key else f"{db.settings.var_dir}/secrets_key"
    typer.echo(f"re-encrypted {done.secrets} secret(s) and {done.webhook_secrets} webhook signing secret(s) "
               f"in {done.tenants} tenant(s) under {where}")


def main(argv: list[str] | None = None) -> None:
    try:
        result = app(args=argv, standalone_mode=False)
    except (AlmanacError, CliError) as exc:
        _fail(getattr(exc, "message", None) or str(exc))
    except Exception as exc:
        # Typer's click (vendored in newer releases) raises its own classes; recognise them by shape.
        name = type(exc).__name__
        if name == "Exit":
            sys.exit(getattr(exc, "exit_code", 0))
        if name == "Abort":
            _fail("aborted")
        if name == "NoArgsIsHelpError":
            print(exc.format_message(), file=sys.stderr)
            sys.exit(2)
        if hasattr(exc, "format_message"):
            ctx = getattr(exc, "ctx", None)
            hint = f" (try '{ctx.command_path} --help')" if ctx is not None else ""
            _fail(exc.format_message().replace("\n", " ") + hint)
        raise
    if isinstance(result, int) and result:
        sys.exit(result)


def _fail(message: str) -> None:
    print(f"almanac: error: {message}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
