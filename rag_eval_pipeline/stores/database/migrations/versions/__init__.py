"""One file per revision; each is frozen once released: change the schema with a new revision."""
