"""`zkcompat serve`: one server, standalone or a member of the ensemble its zoo.cfg names."""

import asyncio
import logging
import sys
from pathlib import Path

import click

from zkcompat import config as zkconfig
from zkcompat.cli import logfmt, startup
from zkcompat.config import zoocfg
from zkcompat.store.datadir import RecoveryError

log = logging.getLogger(__name__)

# --port P moves the HTTP ports that are still at ZooKeeper's defaults by P - 2181, so a
# second server started with its own --port alone (2182) gets 8081 and 7001, not a clash.
CLIENT_PORT_DEFAULT = 2181  # ZooKeeper's zoo_sample.cfg
ADMIN_PORT_KEYS = ("admin.serverPort", "zookeeper.admin.serverPort")
METRICS_PORT_KEYS = ("metricsProvider.httpPort",)
PORT_MAX = 65535


def _setup_logging(level: str, fmt: str = "text") -> None:
    logfmt.setup(level, fmt, sys.stderr)
    logfmt.log_sigterm(log)


@click.command()
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), help="A ZooKeeper zoo.cfg.")
@click.option("--port", type=int, help="clientPort (overrides the config).")
@click.option("--address", help="clientPortAddress (overrides the config).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="dataDir (overrides the config).")
@click.option("--admin-port", type=click.IntRange(0, PORT_MAX),
              help="The AdminServer's port (admin.serverPort); 0: no AdminServer.  "
              "[default: 8080, moved with --port]")
@click.option("--metrics-port", type=click.IntRange(0, PORT_MAX),
              help="Prometheus /metrics on this port (metricsProvider.httpPort); 0: off.  "
              "[default: off, as in ZooKeeper, unless zoo.cfg names the Prometheus "
              "provider; then 7000, moved with --port]")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(logfmt.LEVELS, case_sensitive=False))
@click.option("--log-format", default="text", show_default=True, type=click.Choice(logfmt.FORMATS),
              help="text: one key=value line per event; json: one JSON object per line.")
def serve(config_path, port, address, data_dir, admin_port, metrics_port, log_level,
          log_format) -> None:
    """Run a server: standalone by default (127.0.0.1:2181, data under ./data, the
    AdminServer on 127.0.0.1:8080), or a member of the ensemble a zoo.cfg with server.N
    lines describes. --port P alone also moves the AdminServer and metrics ports by
    P - 2181 (2182: 8081 and 7001), unless zoo.cfg or --admin-port/--metrics-port set them,
    so two servers on one machine need only their own --port and --data-dir."""
    _setup_logging(log_level, log_format)
    overrides = {}
    if config_path is None:
        overrides = {"clientPortAddress": "127.0.0.1", "dataDir": "data"}
    if port is not None:
        overrides["clientPort"] = str(port)
    if address is not None:
        overrides["clientPortAddress"] = address
    if data_dir is not None:
        overrides["dataDir"] = str(data_dir)
    overrides.update(http_overrides(admin_port, metrics_port))
    try:
        cfg = zkconfig.load(config_path, overrides)
    except zkconfig.ConfigError as e:
        raise click.ClickException(f"bad configuration: {e}") from None
    move_http_ports(cfg, port)
    try:
        import uvloop  # noqa: PLC0415
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    from zkcompat.peer.node import serve as run_server  # noqa: PLC0415

    try:
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        mode = (f"ensemble server_id={cfg.server_id} voters={len(cfg.voters)}"
                if cfg.is_ensemble else "standalone")
        # A start-up event, not a claim: event=listening follows once the port is bound.
        log.info("event=starting address=%s port=%d mode=%s data_dir=%s",
                 cfg.client_port_address, cfg.client_port, mode, cfg.data_dir)
        runner(run_server(cfg))
    except KeyboardInterrupt:
        pass
    except RecoveryError as e:
        raise click.ClickException(f"cannot recover {cfg.data_dir}: {e}") from None
    except OSError as e:
        # One line naming the setting, the cause and what to do (cli/startup.py), else
        # the OS's own words: an environment that stops start-up is no traceback.
        raise click.ClickException(startup.explain(e, cfg) or f"cannot start: {e}") from None


def http_overrides(admin_port: int | None, metrics_port: int | None) -> dict[str, str]:
    """The zoo.cfg keys --admin-port and --metrics-port stand for (0: that server off)."""
    out = {}
    if admin_port is not None:
        out["admin.enableServer"] = "true" if admin_port else "false"
        if admin_port:
            out["admin.serverPort"] = str(admin_port)
    if metrics_port is not None:
        out["metricsProvider.className"] = (zoocfg.PROMETHEUS_PROVIDER if metrics_port
                                            else zoocfg.DEFAULT_METRICS_PROVIDER)
        if metrics_port:
            out["metricsProvider.httpPort"] = str(metrics_port)
    return out


def move_http_ports(cfg: zkconfig.Config, port: int | None) -> None:
    """With --port P, the AdminServer and metrics ports that nothing set (neither zoo.cfg nor
    a flag: still ZooKeeper's 8080 and 7000) move by P - 2181 along with it."""
    if not port:  # none, or 0 (any free port): nothing to move along with
        return
    offset = port - CLIENT_PORT_DEFAULT
    moves = (("admin_server_port", cfg.admin_enable_server, ADMIN_PORT_KEYS,
              zoocfg.ADMIN_SERVER_PORT_DEFAULT, "AdminServer", "--admin-port"),
             ("metrics_http_port", cfg.metrics_enabled, METRICS_PORT_KEYS,
              zoocfg.METRICS_HTTP_PORT_DEFAULT, "metrics", "--metrics-port"))
    for field, enabled, keys, default, what, flag in moves:
        if not enabled or getattr(cfg, field) != default or any(k in cfg.raw for k in keys):
            continue
        moved = default + offset
        if not 0 < moved <= PORT_MAX:
            raise click.ClickException(
                f"--port {port}: the {what} port would move with it to {moved} "
                f"({default} + {port} - {CLIENT_PORT_DEFAULT}), which is no port; give "
                f"{flag} N (0 for off)")
        setattr(cfg, field, moved)
