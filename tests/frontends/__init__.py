"""The app, plain and headless front ends, driven as a person drives them."""
