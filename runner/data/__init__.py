"""Reading a competition's public folder into a Dataset: tables, texts, images, sounds and pages."""
