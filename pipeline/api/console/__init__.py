"""The review console and operator dashboard: server-rendered pages under ``/console``.

:mod:`~pipeline.api.console.routes` holds the pages and ``install_console``;
:mod:`~pipeline.api.console.caller` resolves who calls them and checks their forms;
:mod:`~pipeline.api.console.session` signs sessions and CSRF tokens,
:mod:`~pipeline.api.console.views` reads what the pages show,
:mod:`~pipeline.api.console.render` renders ``templates/`` (Jinja2, autoescaped) and
:mod:`~pipeline.api.console.headers` sets the pages' security headers,
:mod:`~pipeline.api.console.flash` holds the status line's fixed messages; ``static/``
holds the console's own script and stylesheet.

Nothing is imported here: :mod:`pipeline.api.context` needs the session signer and the
views while the routes need the context, so each module is imported by its own name.
"""
