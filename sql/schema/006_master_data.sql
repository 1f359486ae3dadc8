-- Tenant master data the validation policy checks extractions against:
-- known suppliers with their VAT ids and the IBANs on file.
CREATE TABLE suppliers (
  id          uuid PRIMARY KEY,
  tenant_id   uuid NOT NULL REFERENCES tenants(id),
  name        text NOT NULL,
  vat_id      text NOT NULL,
  ibans       text[] NOT NULL DEFAULT ARRAY[]::text[],
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, vat_id)
);
