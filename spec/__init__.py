"""The kit's bundled specs, written here and installed as the package
``lifecycle_specs`` (setup.py); ``conformance specs`` lists them."""
