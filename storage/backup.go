package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FileInfo describes a castiron SQLite database file (a backup, or the
// database of a data dir).
type FileInfo struct {
	SchemaVersion int   // newest migration applied
	Nodes         int   // rows in nodes
	Bytes         int64 // file size
}

// readerOf opens path without creating it (the driver would make an empty
// database of a missing file), read-only unless forVacuum: query_only also
// refuses VACUUM INTO, which writes only its output file.
func readerOf(path string, forVacuum bool) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("invalid database path %q", path)
	}
	dsn := path + "?_pragma=busy_timeout(5000)"
	if !forVacuum {
		dsn += "&_pragma=query_only(1)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// BackupSQLite writes a consistent copy of the SQLite database at src to
// dest with VACUUM INTO: one read transaction, so the copy holds every
// transaction committed before it began and none after, and (the database
// being in WAL mode) it neither blocks a running castiron's writes nor waits
// for them. SQLite's own file locks make it safe beside a running castiron.
// The copy is written next to dest, synced, checked, then renamed into
// place; dest must not exist.
func BackupSQLite(ctx context.Context, src, dest string) (FileInfo, error) {
	if _, err := os.Lstat(dest); err == nil {
		return FileInfo{}, fmt.Errorf("backup: %s exists; give a new file name", dest)
	}
	db, err := readerOf(src, true)
	if err != nil {
		return FileInfo{}, fmt.Errorf("backup: database: %w", err)
	}
	defer db.Close()
	tmp := dest + ".partial"
	_ = os.Remove(tmp) // left by an interrupted backup
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		_ = os.Remove(tmp)
		return FileInfo{}, fmt.Errorf("backup: VACUUM INTO: %w", err)
	}
	info, err := CheckSQLiteFile(ctx, tmp)
	if err == nil {
		err = syncFile(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dest)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return FileInfo{}, fmt.Errorf("backup: %w", err)
	}
	return info, syncDir(filepath.Dir(dest))
}

// CheckSQLiteFile verifies that path is an intact castiron database that
// this castiron can open (its schema is not newer than this binary's).
func CheckSQLiteFile(ctx context.Context, path string) (FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return FileInfo{}, err
	}
	db, err := readerOf(path, false)
	if err != nil {
		return FileInfo{}, err
	}
	defer db.Close()
	var check string
	if err := db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&check); err != nil {
		return FileInfo{}, fmt.Errorf("%s is not a readable SQLite database: %w", path, err)
	}
	if check != "ok" {
		return FileInfo{}, fmt.Errorf("%s is damaged: %s", path, check)
	}
	info := FileInfo{Bytes: st.Size()}
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&info.SchemaVersion); err != nil {
		return FileInfo{}, fmt.Errorf("%s is not a castiron database (no schema_migrations): %w", path, err)
	}
	ms, err := loadMigrations()
	if err != nil {
		return FileInfo{}, err
	}
	if newest := ms[len(ms)-1].version; info.SchemaVersion > newest {
		return FileInfo{}, fmt.Errorf("%s has schema version %d, newer than this castiron's %d: restore it with that castiron or a newer one",
			path, info.SchemaVersion, newest)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM nodes").Scan(&info.Nodes); err != nil {
		return FileInfo{}, fmt.Errorf("%s: count nodes: %w", path, err)
	}
	return info, nil
}

// RestoreSQLite makes the database at path a copy of backup. The database
// there (with its -wal and -shm files) is kept as path.pre-restore-<stamp>,
// never deleted. The caller makes sure no castiron has it open (data dir
// lock): this replaces files under a running server otherwise.
func RestoreSQLite(ctx context.Context, backup, path, stamp string) (FileInfo, error) {
	info, err := CheckSQLiteFile(ctx, backup)
	if err != nil {
		return FileInfo{}, fmt.Errorf("restore: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return FileInfo{}, fmt.Errorf("restore: %w", err)
	}
	tmp := path + ".restoring"
	if err := copyFile(backup, tmp); err != nil {
		_ = os.Remove(tmp)
		return FileInfo{}, fmt.Errorf("restore: %w", err)
	}
	// The old database goes aside with its WAL (committed data may be in
	// it alone) and shared memory index; a WAL left behind would be applied
	// to the restored file.
	for _, suffix := range []string{"", "-wal", "-shm"} {
		old := path + suffix
		if _, err := os.Lstat(old); err == nil {
			if err := os.Rename(old, path+".pre-restore-"+stamp+suffix); err != nil {
				_ = os.Remove(tmp)
				return FileInfo{}, fmt.Errorf("restore: keep the old database: %w", err)
			}
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return FileInfo{}, fmt.Errorf("restore: %w", err)
	}
	return info, syncDir(filepath.Dir(path))
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := out.ReadFrom(in); err != nil {
		out.Close()
		return err
	}
	return errors.Join(out.Sync(), out.Close())
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
