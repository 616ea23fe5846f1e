"""Command-line interface (`dnnpart ...`)."""
