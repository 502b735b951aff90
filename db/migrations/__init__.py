"""db/migrations."""
