/* tiny I/O for small Darshan logs: a file written in 4 KiB calls and read back, a STDIO file, /proc, a pipe, a FIFO */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif
int main(int argc, char **argv) {
    int rank = 0;
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
    const char *dir = argc > 1 ? argv[1] : ".";
    char path[4096], buf[4096];
    memset(buf, 'x', sizeof buf);
    snprintf(path, sizeof path, "%s/data.%d.bin", dir, rank);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    for (int i = 0; i < 4; i++) write(fd, buf, sizeof buf);
    fsync(fd);
    close(fd);
    fd = open(path, O_RDONLY);
    while (read(fd, buf, 1000) > 0) {}
    close(fd);
    struct stat st;
    stat(path, &st);
    snprintf(path, sizeof path, "%s/notes.%d.txt", dir, rank);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 100; i++) fprintf(f, "line %d of rank %d\n", i, rank);
    fclose(f);
    fd = open("/proc/self/status", O_RDONLY);
    while (read(fd, buf, sizeof buf) > 0) {}
    close(fd);
    int p[2];
    pipe(p);
    write(p[1], "hello", 5);
    read(p[0], buf, 5);
    close(p[0]); close(p[1]);
    if (rank == 0) {
        snprintf(path, sizeof path, "%s/pipe_fifo", dir);
        mkfifo(path, 0600);
        pid_t child = fork();
        if (child == 0) { int w = open(path, O_WRONLY); write(w, "through the fifo", 16); close(w); _exit(0); }
        fd = open(path, O_RDONLY);
        while (read(fd, buf, sizeof buf) > 0) {}
        close(fd);
        unlink(path);
    }
#ifdef WITH_MPI
    MPI_File fh;
    snprintf(path, sizeof path, "%s/shared.mpiio", dir);
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    MPI_File_write_at_all(fh, (MPI_Offset)rank * 2048, buf, 2048, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_Finalize();
#endif
    return 0;
}
