"""Release rendering: every response written once into an immutable, verified release."""
