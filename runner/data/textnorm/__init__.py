"""Text normalisation as a table the engines learn: candidate spoken forms and the rules learned from train."""
