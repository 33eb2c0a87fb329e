"""The ``mathsearch`` command line: the top floor, which nothing else imports.

:func:`mathsearch.cli.main.main` builds the parser from one module per command family."""
