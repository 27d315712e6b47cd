"""The ``tessera`` command: serve, migrate, and manage projects and credentials.

Every command reads the same settings as the server (``TESSERA_DATABASE_URL``, ...). Commands
that print credentials print JSON on stdout and nothing else, so scripts can parse it. Each
group of commands is a module of this package; this one puts them together:

- ``processes``: ``serve``, ``worker``, ``devchain`` (what runs until stopped);
- ``database``: ``db upgrade|status``, ``secrets rotate``;
- ``backup``: ``backup create|verify|restore``;
- ``projects``: ``project ...``, ``apikey ...``, ``client ...``, ``identity bind``, ``token``,
  ``demo``;
- ``webhooks``: ``webhook ...``, ``operator create``; ``jobs``: ``jobs ...``, ``chain reconcile``.

A command imports the use-cases it runs when it runs, so that ``tessera --help`` starts fast.
"""

import typer

from tessera.cli import backup, database, jobs, processes, projects, webhooks

app = typer.Typer(no_args_is_help=True, help="Tessera: event tickets, perks and user wallets.")
app.command()(processes.serve)
app.command()(processes.worker)
app.command()(processes.devchain)
app.command()(projects.token)
app.command()(projects.demo)
app.add_typer(database.app, name="db")
app.add_typer(projects.app, name="project")
app.add_typer(projects.apikey_app, name="apikey")
app.add_typer(projects.client_app, name="client")
app.add_typer(projects.identity_app, name="identity")
app.add_typer(jobs.app, name="jobs")
app.add_typer(jobs.chain_app, name="chain")
app.add_typer(webhooks.app, name="webhook")
app.add_typer(webhooks.operator_app, name="operator")
app.add_typer(database.secrets_app, name="secrets")
app.add_typer(backup.app, name="backup")
