-- Tenant names are unique case-insensitively (issue 45, defect 3): "Acme" and "acme"
-- would be two tenants an operator cannot tell apart in a listing or on the command
-- line. The rest of a name's form (trimmed, NFC, no invisible characters, not
-- UUID-shaped) is checked where tenants are created (pipeline/tenants/names.py).
-- On a database that already holds two names differing only in case this migration
-- fails and names both: rename one (UPDATE tenants SET name = ...) and migrate again.
CREATE UNIQUE INDEX tenants_name_lower_key ON tenants (lower(name));
