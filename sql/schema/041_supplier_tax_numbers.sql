-- A supplier known by its tax number (issue 44): EN 16931 lets a seller state a tax
-- registration number (BT-32; CII SpecifiedTaxRegistration/ID schemeID="FC", UBL a
-- PartyTaxScheme other than VAT) without a VAT id, and an invoice "not subject to VAT"
-- (category O) states no seller VAT id at all. Master data holds either or both:
-- the VAT id is no longer required, one of the two is, and each is unique per tenant
-- (several suppliers without a tax number, or without a VAT id, stay possible: NULLs
-- are distinct).
ALTER TABLE suppliers ALTER COLUMN vat_id DROP NOT NULL;
ALTER TABLE suppliers ADD COLUMN tax_number text;
ALTER TABLE suppliers ADD CONSTRAINT suppliers_tenant_id_tax_number_key
  UNIQUE (tenant_id, tax_number);
ALTER TABLE suppliers ADD CONSTRAINT suppliers_identified CHECK (
  coalesce(vat_id, '') <> '' OR coalesce(tax_number, '') <> ''
);
