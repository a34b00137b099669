"""Attacks on the trust boundary: hostile models, hostile repositories, hostile files and servers."""
