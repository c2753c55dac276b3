"""Every check of `uwf doctor`, in a fixed order, gathered into one Diagnosis.

The store is opened only when it exists (a folder) or its server answers (PostgreSQL),
and nothing is written to it: no view made or caught up, no tail cut, no lock held
beyond a look. A check that cannot run because an earlier one failed is left out.
"""

from __future__ import annotations

from uwf.config.settings import Settings
from uwf.doctor import machine, servers, storechecks
from uwf.doctor.results import Check, Diagnosis, fail, ok
from uwf.engine.dburl import shown
from uwf.errors import UwfError


def diagnose(settings: Settings, *, database: str | None = None, broker: str | None = None,
             broker_password_env: str | None = None, anchors: str | None = None,
             timeout: float = 3.0) -> Diagnosis:
    """Check this machine, the store of `settings`, its config and the servers named."""
    if database is not None:
        servers.check_database_url(database)
    if broker is not None:
        from uwf.queue.broker import parse_broker

        parse_broker(broker, broker_password_env)  # a malformed URL: refused before any check
    checks = [machine.python(), machine.extras()]
    checks += _store(settings, anchors, timeout)
    found, loaded = machine.config(settings)
    checks += found
    checks += machine.agents(settings, loaded)
    if database is not None:
        checks.append(servers.postgres(database, timeout))
    if broker is not None:
        checks.append(servers.mqtt(broker, broker_password_env, settings.environ, timeout))
    where = (shown(settings.store_url) if settings.store_url is not None
             else str(settings.store_root))
    return Diagnosis(ok=all(check.status != "fail" for check in checks), store=where,
                     checks=checks)


def _store(settings: Settings, anchors: str | None, timeout: float) -> list[Check]:
    from uwf.store import Store

    if settings.store_url is not None:
        reached = servers.postgres(settings.store_url, timeout, name="store")
        if reached.status != "ok":
            return [reached]
        checks = [reached]
    else:
        root = settings.store_root
        if not root.exists():
            return [ok("store", f"no store at {root} yet (the first command that writes "
                       "makes it)"), machine.disk(settings)]
        if not root.is_dir():
            return [fail("store", f"{root} is not a folder",
                         "give a store folder with --store or UWF_HOME"),
                    machine.disk(settings)]
        checks = [ok("store", f"{root}")]
    try:
        store = Store.open(settings=settings)
    except UwfError as error:
        return [*checks, fail("store", error.what, error.next_action or "run `uwf log verify`")]
    try:
        checks.append(storechecks.store_format(store))
        writing = False
        if store.root is not None and settings.store_url is None:
            held, writing = storechecks.lock(store.root)
            checks.append(held)
        checks.append(storechecks.views(store.journal))
        from uwf.engine.filelog import FileLog

        if isinstance(store.log, FileLog):
            checks.append(storechecks.log_tail(store.log, writing))
            checks.append(machine.disk(settings))
        checks.append(storechecks.anchors(settings, store.log, anchors))
    finally:
        store.close()
    return checks
