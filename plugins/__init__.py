"""Built-in backend plugins (import package ``harness_plugins``). Each subpackage
registers through the ``harness.backends`` entry-point group, like a third-party one."""
