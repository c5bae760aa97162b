"""`zkcompat serve`: one server, standalone or a member of the ensemble its zoo.cfg names."""

import asyncio
import logging
import sys
from pathlib import Path

import click

from zkcompat import config as zkconfig
from zkcompat.cli import logfmt
from zkcompat.store.datadir import RecoveryError

log = logging.getLogger(__name__)


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
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(logfmt.LEVELS, case_sensitive=False))
@click.option("--log-format", default="text", show_default=True, type=click.Choice(logfmt.FORMATS),
              help="text: one key=value line per event; json: one JSON object per line.")
def serve(config_path, port, address, data_dir, log_level, log_format) -> None:
    """Run a server: standalone by default (127.0.0.1:2181, data under ./data), or a member
    of the ensemble a zoo.cfg with server.N lines describes."""
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
    try:
        cfg = zkconfig.load(config_path, overrides)
    except zkconfig.ConfigError as e:
        raise click.ClickException(f"bad configuration: {e}") from None
    cfg.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        import uvloop  # noqa: PLC0415
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    from zkcompat.peer.node import serve as run_server  # noqa: PLC0415

    mode = (f"ensemble server_id={cfg.server_id} voters={len(cfg.voters)}" if cfg.is_ensemble
            else "standalone")
    log.info("event=starting address=%s port=%d mode=%s data_dir=%s", cfg.client_port_address,
             cfg.client_port, mode, cfg.data_dir)
    try:
        runner(run_server(cfg))
    except KeyboardInterrupt:
        pass
    except RecoveryError as e:
        raise click.ClickException(f"cannot recover {cfg.data_dir}: {e}") from None
    except OSError as e:
        raise click.ClickException(f"cannot listen on {cfg.client_port_address}:"
                                   f"{cfg.client_port}: {e}") from None
