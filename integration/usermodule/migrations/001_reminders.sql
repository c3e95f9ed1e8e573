CREATE SCHEMA shop;
CREATE TABLE shop.reminders (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer text NOT NULL,
    sent     boolean NOT NULL DEFAULT false,
    job      bigint
);
