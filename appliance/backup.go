package appliance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"castiron/storage"
)

// dbFile is the SQLite database of a data dir.
func dbFile(dataDir string) string { return filepath.Join(dataDir, "castiron.db") }

// dataDirLock is the lock a castiron serving a data dir holds (flock on
// DATA-DIR/castiron.lock, released by the kernel however the process ends),
// so that a second castiron or a restore on that data dir refuses to run.
type dataDirLock struct{ f *os.File }

var errDataDirBusy = errors.New("data dir in use")

// lockDataDir takes the data dir's lock without waiting; when another
// process holds it the error names its PID.
func lockDataDir(dir string) (*dataDirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "castiron.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := strings.TrimSpace(string(b))
		if holder == "" {
			holder = "unknown"
		}
		return nil, fmt.Errorf("%w: a castiron (pid %s) is running on %s", errDataDirBusy, holder, dir)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

func (l *dataDirLock) release() {
	_ = l.f.Truncate(0)
	_ = l.f.Close() // closing drops the flock
}

const backupUsage = `usage: castiron backup [serve flags] FILE
       castiron restore [serve flags] FILE

backup writes a consistent copy of the SQLite database of --data-dir (or of
the --config file's data-dir) to FILE, also while castiron serves: SQLite's
VACUUM INTO, one read transaction that does not stop writers. FILE must not
exist.

restore makes FILE the database of --data-dir, keeping the one there as
castiron.db.pre-restore-<time>; it refuses while a castiron runs on that data
dir. With --database (PostgreSQL) use pg_dump and pg_restore instead.
`

// Backup is `castiron backup [flags] FILE`.
func Backup(args []string) error {
	c, dest, err := backupFlags("backup", args)
	if err != nil {
		return err
	}
	start := time.Now()
	info, err := storage.BackupSQLite(context.Background(), dbFile(c.dataDir), dest)
	if err != nil {
		return err
	}
	fmt.Printf("castiron backup: %s: %d nodes, schema %d, %d bytes, in %s\n",
		dest, info.Nodes, info.SchemaVersion, info.Bytes, time.Since(start).Round(time.Millisecond))
	return nil
}

// Restore is `castiron restore [flags] FILE`.
func Restore(args []string) error {
	c, src, err := backupFlags("restore", args)
	if err != nil {
		return err
	}
	lock, err := lockDataDir(c.dataDir)
	if err != nil {
		if errors.Is(err, errDataDirBusy) {
			return fmt.Errorf("refusing to restore: %w; stop it first (systemctl stop castiron)", err)
		}
		return err
	}
	defer lock.release()
	stamp := time.Now().UTC().Format("20060102T150405Z")
	info, err := storage.RestoreSQLite(context.Background(), src, dbFile(c.dataDir), stamp)
	if err != nil {
		return err
	}
	if err := chownLikeDir(dbFile(c.dataDir), c.dataDir); err != nil {
		return err
	}
	fmt.Printf("castiron restore: %s is now %s: %d nodes, schema %d (the previous database, if any, is castiron.db.pre-restore-%s)\n",
		dbFile(c.dataDir), src, info.Nodes, info.SchemaVersion, stamp)
	return nil
}

// backupFlags reads serve's settings (flags, environment, --config) for
// their data dir, and the FILE argument.
func backupFlags(cmd string, args []string) (*serveConfig, string, error) {
	fs, c := serveFlags()
	fs.Init(cmd, fs.ErrorHandling())
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), backupUsage+"\nflags:\n")
		fs.PrintDefaults()
	}
	rest, err := resolveFlagsArgs(fs, args, os.LookupEnv, 1)
	if err != nil {
		return nil, "", err
	}
	if c.database != "" {
		return nil, "", fmt.Errorf("%s: --database is PostgreSQL: use pg_dump / pg_restore (castiron %s handles the SQLite database of --data-dir)", cmd, cmd)
	}
	return c, rest[0], nil
}

// chownLikeDir gives path the owner of dir (restore runs as root; the
// service runs as the castiron user, who must be able to write it).
func chownLikeDir(path, dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	return os.Chown(path, int(sys.Uid), int(sys.Gid))
}
