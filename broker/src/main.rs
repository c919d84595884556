fn main() {
    let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(0)).make().unwrap();
    ex.run(async {
        let f = glommio::io::BufferedFile::create("/tmp/gtest").await.unwrap();
        let n = f.write_at(vec![1u8; 4096], 0).await.unwrap();
        f.fdatasync().await.unwrap();
        println!("glommio ok wrote {n}");
    });
}
