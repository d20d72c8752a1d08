"""The bridge's routers, one module per part of the API."""
