"""Built-in subcommands, one module each (installed as ``mqadmin.commands``)."""
