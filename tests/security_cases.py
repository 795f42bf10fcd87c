"""Queries an attacker (or a careless user) sends to a society's ClickHouse; each must be refused."""

from __future__ import annotations

from pathlib import Path

OUTFILE = Path("/tmp/society-security-outfile.txt")
FUNCFILE = Path("/tmp/society-security-function.csv")

ATTACKS: dict[str, str] = {
    "drop": "DROP TABLE events",
    "drop_dead_letters": "DROP TABLE IF EXISTS dead_letters",
    "insert_forged": (
        "INSERT INTO events (event_id, society, type, actor, occurred_at, title) "
        "VALUES (generateUUIDv4(), 'victim', 'post_created', 'FORGED', now64(6), 'FORGED')"
    ),
    "insert_select": "INSERT INTO events SELECT * FROM events LIMIT 1",
    "alter_delete": "ALTER TABLE events DELETE WHERE 1",
    "alter_update": "ALTER TABLE events UPDATE title = 'x' WHERE 1",
    "lightweight_delete": "DELETE FROM events WHERE 1",
    "truncate": "TRUNCATE TABLE dead_letters",
    "rename": "RENAME TABLE events TO events_gone",
    "create": "CREATE TABLE stolen ENGINE = Memory AS SELECT * FROM events",
    "optimize": "OPTIMIZE TABLE events FINAL",
    "set": "SET max_threads = 1",
    "set_readonly": "SET readonly = 0",
    "settings_clause": "SELECT count() FROM events SETTINGS readonly = 0",
    "file_passwd": "SELECT * FROM file('/etc/passwd', 'LineAsString')",
    "file_environ": "SELECT * FROM file('/proc/self/environ', 'LineAsString')",
    "into_outfile": f"SELECT 'x' INTO OUTFILE '{OUTFILE}'",
    "into_outfile_events": f"SELECT * FROM events INTO OUTFILE '{OUTFILE}' FORMAT CSV",
    "insert_function_file": f"INSERT INTO FUNCTION file('{FUNCFILE}', 'CSV', 'x UInt8') VALUES (1)",
    "url": "SELECT * FROM url('http://127.0.0.1:1/', 'LineAsString')",
    "remote": "SELECT * FROM remote('127.0.0.1:1', system.one)",
    "s3": "SELECT * FROM s3('http://127.0.0.1:1/bucket/x.csv', 'CSV')",
    "executable": "SELECT * FROM executable('id', 'LineAsString', 'x String')",
    "input": "SELECT * FROM input('x String')",
    "python": "SELECT * FROM python('x')",
    "multi_statement": "SELECT 1; DROP TABLE events",
    "multi_statement_outfile": f"SELECT 1; SELECT 'x' INTO OUTFILE '{OUTFILE}'",
    "unterminated_comment": "SELECT 1 /*",
    "system_write": "SYSTEM DROP MARK CACHE",
    "system_stop_merges": "SYSTEM STOP MERGES events",
    "kill": "KILL QUERY WHERE 1",
    "use": "USE system",
    "attach": "ATTACH TABLE leak FROM '/etc' (x String) ENGINE = File(LineAsString)",
    "backup": "BACKUP TABLE events TO File('/tmp/society-security-backup')",
    "create_user": "CREATE USER evil IDENTIFIED BY 'x'",
    "grant": "GRANT ALL ON *.* TO default",
    # files, the host and other databases through reads that ClickHouse's read-only mode lets through
    "file_scalar_environ": "SELECT file('/proc/self/environ')",
    "file_scalar_in_lambda": "SELECT arrayMap(p -> length(file(p)), ['/etc/hostname'])",
    "file_scalar_in_where": "SELECT count() FROM events WHERE title = file('/etc/hostname')",
    "server_setting": "SELECT getServerSetting('user_files_path')",
    "hostname": "SELECT hostName(), FQDN()",
    "current_user": "SELECT currentUser()",
    "system_processes": "SELECT query FROM system.processes",
    "system_in_subquery": "SELECT count() FROM events WHERE actor IN (SELECT name FROM system.users)",
    "in_system_table": "SELECT 1 WHERE 'x' IN system.databases",
    "information_schema": "SELECT * FROM information_schema.tables",
    "merge_system": "SELECT * FROM merge('system', '^processes$')",
    "show_tables_system": "SHOW TABLES FROM system",
    "show_databases": "SHOW DATABASES",
    "show_create_system": "SHOW CREATE TABLE system.processes",
    "describe_system": "DESCRIBE system.query_log",
    "dict_get": "SELECT dictGet('system.x', 'y', 1)",
    # a read whose result would grow the process holding the record (4 GB): stopped by max_result_bytes
    "huge_result": "SELECT randomPrintableASCII(4000) FROM numbers(1000000)",
}

WRITTEN = (OUTFILE, FUNCFILE, Path("/tmp/society-security-backup"))
"""Files an attack would create if it ran."""

FINGERPRINT_SQL = (
    "SELECT * FROM (SELECT 'events', count(), sum(cityHash64(toString(event_id), body, _offset)) FROM events "
    "UNION ALL SELECT 'dead_letters', count(), sum(cityHash64(reason, value, _offset)) FROM dead_letters "
    "UNION ALL SELECT 'metrics', count(), sum(cityHash64(toString(metric_id), value, _offset)) FROM metrics) "
    "ORDER BY 1"
)
"""Row counts and checksums of the record: equal before and after the attacks."""

TABLES_SQL = "SHOW TABLES"
"""The society's tables (a reader sees no other): the same set before and after the attacks."""
