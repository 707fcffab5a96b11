"""The ``rbench`` command's subcommands, one module each: its flags (``arguments``) beside the
function that does its work (``main``), as a :class:`~rbench.commands.common.Command`."""
