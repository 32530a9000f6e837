"""The pointwise family (family.py): elementwise work over the inputs' broadcast frame."""
