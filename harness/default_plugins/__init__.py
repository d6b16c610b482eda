"""Plugins that ship inside the core, registered like any other plugin."""
