-- National accounts on file for a supplier (EN 16931 BT-84 that is no IBAN: a Swedish
-- bankgiro or plusgiro), each canonical "SCHEME:ID" (SE:BANKGIRO:50501055:
-- pipeline/invoice/national_accounts.py), so an invoice stating one is accepted only
-- where it is on file. Sealed as the IBANs are (migration 044): with a KEK configured
-- each element of accounts is a sealed value (fenceline-sealed:v1:...) under the
-- tenant's data key and account_keys holds, at the same positions, a keyed hash of
-- each; without a KEK the accounts are stored as they are and account_keys is empty.
ALTER TABLE suppliers
  ADD COLUMN accounts text[] NOT NULL DEFAULT ARRAY[]::text[],
  ADD COLUMN account_keys text[] NOT NULL DEFAULT ARRAY[]::text[];
ALTER TABLE suppliers ADD CONSTRAINT suppliers_account_keys_aligned CHECK (
  cardinality(account_keys) = 0 OR cardinality(account_keys) = cardinality(accounts)
);
