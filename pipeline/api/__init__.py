"""The HTTP face: the FastAPI app, its routes, problems, intake, status streams,
review and the console's job views.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.api.app import create_app

__all__ = [
    "create_app",
]
