"""What tests share: helpers, problem files, fake servers, spec lists and the data they read, imported as
`tests.support.<module>` (tests/ is a package; pyproject's `pythonpath` puts the repository first on the
import path). A test module imports from here, never from another test module, and never edits sys.path
(tests/test_layout.py holds both)."""
