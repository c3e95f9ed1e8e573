-- The error catalogue lists only what docket raises. DK008 (four-eyes: an
-- actor excluded from claiming or answering a human task) is raised by
-- nothing yet, so it leaves docket.error_codes and package db until the
-- human tasks that raise it land. The code stays reserved for that meaning:
-- no other condition will ever take it.

-- +goose Up
DELETE FROM docket.error_codes WHERE code = 'DK008';

-- +goose Down
INSERT INTO docket.error_codes (code, name, meaning) VALUES
    ('DK008', 'ErrExcludedActor', 'four-eyes: this actor may not claim or answer this task');
