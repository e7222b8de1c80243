"""Seeded data generators and offline loaders shared by the chapters."""
