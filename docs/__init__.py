"""The kit's documentation, written here and installed as
``conformance.docs`` (setup.py) so that ``conformance docs`` can print it."""
