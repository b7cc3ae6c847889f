"""The built-in run plugins (hooks in :mod:`harness.hookspecs`): the sweep journal, the JSON records, the
console and MLflow, registered by the plugin manager (``harness.plugins.BUILTIN``) as any plugin is."""
