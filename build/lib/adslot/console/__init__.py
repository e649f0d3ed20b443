"""The operator console: a media owner's ad-ops and operations teams run both environments from a browser."""
