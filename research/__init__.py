"""Research prototypes: ideas measured on the validation papers, outside the package.

Not installed with mathsearch (the wheel holds ``mathsearch`` alone) and not part of its import
contract. Run each from the repository root as a module, ``python -m research.<name>``, after
``pip install -e ".[research]"``; research/README.md lists what each one tested and where its
figures are recorded.
"""
