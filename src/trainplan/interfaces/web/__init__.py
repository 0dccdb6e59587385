"""The web calculator: a FastAPI app over `estimate()` and the page that renders its JSON.

Nothing here computes a figure: every number comes from the engine. Importing this package is
cheap (no FastAPI); `trainplan.interfaces.web.app.create_app()` builds the app.
"""
