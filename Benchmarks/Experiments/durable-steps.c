// The baseline of `secure_write_vs_plain_durable_write` (temporary file, fsync, rename, folder fsync) with each extra
// step of a Prefs vault commit added by a bit of MODE: 1 a flock on the data file held across the rename, 2 the
// commit file written in place, 4 the rollback record appended. `cc -O2 -o steps durable-steps.c && ./steps MODE 500 DIR`
// prints microseconds per write. Used for docs/BENCHMARKS.md (round 9).
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/file.h>
#include <time.h>
#include <string.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  int mode=atoi(argv[1]); int n=atoi(argv[2]); const char*dir=argv[3];
  char path[512],tmp[512],cpath[512],rpath[512]; snprintf(path,512,"%s/f",dir); snprintf(tmp,512,"%s/f.tmp",dir);
  snprintf(cpath,512,"%s/.f.commit",dir); snprintf(rpath,512,"%s/rec",dir);
  char buf[6005]; memset(buf,'x',sizeof buf);
  int f=open(path,O_CREAT|O_WRONLY,0600); write(f,buf,sizeof buf); close(f);
  int rec=open(rpath,O_CREAT|O_WRONLY|O_TRUNC|O_APPEND,0600);
  double t0=now();
  for(int i=0;i<n;i++){
    int lk=-1;
    if(mode&1){ lk=open(path,O_RDONLY); flock(lk,LOCK_EX); }
    int fd=open(tmp,O_CREAT|O_TRUNC|O_WRONLY,0600); buf[i%6000]++; write(fd,buf,sizeof buf); fsync(fd); close(fd);
    if(mode&2){ int c=open(cpath,O_CREAT|O_WRONLY,0600); write(c,buf,1676); ftruncate(c,1676); close(c);} 
    rename(tmp,path);
    int d=open(dir,O_RDONLY|O_DIRECTORY); fsync(d); close(d);
    if(mode&4){ if(rec>=0 && lseek(rec,0,SEEK_END)>4000) ftruncate(rec,0); write(rec,"22\n",3);} 
    if(lk>=0) close(lk);
  }
  printf("%.1f ",(now()-t0)/n*1e6); fflush(stdout);
  return 0;
}
